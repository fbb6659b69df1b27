"""jaxpapers.multiclass (being written)."""
