"""Adapters for inference frameworks (imported on demand; none is imported by ``import pda``)."""
