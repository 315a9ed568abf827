"""Skill catalogs shipped with bt_exec (JSON data, validated by schemas/skill-catalog.schema.json)."""
