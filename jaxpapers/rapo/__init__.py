"""jaxpapers.rapo (being written)."""
