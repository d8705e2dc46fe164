"""Media: where items come from (sources), the download cache (download), the decoding
memory budget (budget), the worker pool (pool), and the resolver that ties them (resolver).
Decoding itself belongs to each modality (``Modality.decode``)."""

from mmrun.media.download import Downloader, ProgressFn
from mmrun.media.resolver import MediaItem, MediaResolver, decoded_bytes, prefetch_budget
from mmrun.media.sources import Source, parse_source

__all__ = [
    "Downloader",
    "MediaItem",
    "MediaResolver",
    "ProgressFn",
    "Source",
    "decoded_bytes",
    "parse_source",
    "prefetch_budget",
]
