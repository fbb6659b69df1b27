"""jaxpapers.scale (being written)."""
