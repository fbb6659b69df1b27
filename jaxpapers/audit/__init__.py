"""jaxpapers.audit (being written)."""
