"""Result objects: ``ProfileResult`` and its builder, ``Comparison``, ``ManyRanksResult``, advice.

Plain data with no torch inside; each serialises to JSON from its fields.
"""
