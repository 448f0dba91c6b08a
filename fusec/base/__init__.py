"""The bottom layer: symbolic sizes (``shapes``), the dtype table, remarks and the environment, used by every stage."""
