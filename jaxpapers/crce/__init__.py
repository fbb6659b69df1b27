"""jaxpapers.crce (being written)."""
