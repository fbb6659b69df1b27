"""jaxpapers.steam (being written)."""
