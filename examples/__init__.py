"""Example scenario packs, written only against ``agents.packs`` (docs/packs.md)."""
