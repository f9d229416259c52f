"""The on-disk formats icemv writes and reads (docs/format.md): an MV's view metadata, the
refresh-state record, the snapshot summary keys, the quarantine property, partitioning and
durations; pure codecs, no I/O."""
