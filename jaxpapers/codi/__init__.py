"""jaxpapers.codi (being written)."""
