"""P17: Implicit-Euler value iteration (being written)."""
