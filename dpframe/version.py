"""The version of dpframe (one definition; recorded in every provenance document)."""

__version__ = "0.1.0"
