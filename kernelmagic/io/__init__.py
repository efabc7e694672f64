"""Files and frames: saving and loading profiles, reading traces and rank folders, DataFrames."""
