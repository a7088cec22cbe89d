"""DALI's built-in operators after the source: arithmetic, dali.math, data movement, random
(one module per family, one table)."""
