"""jaxpapers.graphons (being written)."""
