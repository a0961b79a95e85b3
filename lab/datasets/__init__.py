"""Extra human interaction data sets for the scoring-quality harness: readers (readers.py), the
unpacking script (unpack.sh), a figures script (summary.py) and one SOURCE.md per set. The data
itself lives outside the repository, in ~/.cache/telltale-datasets/ (or $TELLTALE_EXTRA_DATASETS)."""
