"""Renderers: small classes with one ``render`` method over a receipt. They compute nothing."""
