"""Turning raw task outputs into what an application wants (entities, rankings)."""
