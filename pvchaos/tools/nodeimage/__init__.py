"""kind node images built offline (see recipe.py for why and what goes in)."""
