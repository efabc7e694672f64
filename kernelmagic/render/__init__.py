"""Renderers: pure functions from a ``ProfileResult`` to text, HTML, PNG or widgets."""
