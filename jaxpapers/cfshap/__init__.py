"""jaxpapers.cfshap (being written)."""
