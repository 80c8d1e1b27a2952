"""paperzoo.data: the data-set catalog, checksum-verified storage and download, and readers.

Sets live in ``$PAPERZOO_DATA/<name>/`` (default ``~/.cache/paperzoo``); see :mod:`paperzoo.data.catalog`
for how each file is verified and where it comes from, :mod:`paperzoo.data.download` for ``fetch``.
Readers return torch datasets with the documented splits and raise :class:`DataNotFoundError` (one
message: which set, where it looked, how to get it) when a set is missing, and :class:`DataIntegrityError`
(the file, the expected and actual sha256, the remedy) when a file they would read is damaged; each file is
hashed once, the verdict remembered under :func:`user_cache_dir`. Sets that were repacked for the reference
copy are rebuilt by ``fetch`` from their public originals (:mod:`paperzoo.data.upstream`).
"""

from paperzoo.data.avmnist import AVMNIST, AVMNISTParams, generate_avmnist
from paperzoo.data.catalog import ARCHIVES, DATASETS, Archive, BuildInfo, DatasetInfo, FileInfo, get_info
from paperzoo.data.cifar import load_cifar10
from paperzoo.data.download import DownloadError, download_file, fetch
from paperzoo.data.fsdd import SpokenDigits, load_fsdd, pad_or_crop, read_fsdd_tar
from paperzoo.data.idx import load_fashion_mnist, load_mnist, parse_idx, read_idx
from paperzoo.data.lesions import LesionParams, LesionSet, insert_lesions, load_lesions
from paperzoo.data.nerf import NerfScene, composite, focal_from_fov, holdout, load_blender, load_tiny_nerf
from paperzoo.data.nerfies import Cameras, NerfiesCapture, load_nerfies, nerfies_rays
from paperzoo.data.nonrigid import (
    NonrigidTruth,
    canonical_fields,
    generate_nonrigid,
    load_nonrigid_truth,
    render_nonrigid,
    true_warp,
)
from paperzoo.data.store import (
    DataIntegrityError,
    DataNotFoundError,
    cache_root,
    data_root,
    data_root_source,
    is_present,
    require,
    save_root,
    saved_root_file,
    sha256_file,
    user_cache_dir,
    verify,
)
from paperzoo.data.tensors import ArrayDataset, ImageDataset
from paperzoo.data.text import (
    TextDataset,
    load_agnews,
    load_imdb,
    load_senteval,
    load_sms_spam,
    load_sst2,
    load_tinyshakespeare,
    load_wikitext2,
    load_youtube_spam,
    read_imdb_csv,
    seeded_split,
)

__all__ = [
    "ARCHIVES", "Archive", "ArrayDataset", "BuildInfo", "Cameras", "DATASETS", "DataIntegrityError",
    "DataNotFoundError", "DatasetInfo", "DownloadError", "FileInfo", "ImageDataset", "LesionParams", "LesionSet",
    "NerfScene", "NerfiesCapture",
    "NonrigidTruth", "SpokenDigits", "TextDataset", "cache_root", "canonical_fields", "composite", "data_root",
    "data_root_source", "save_root", "saved_root_file",
    "download_file", "fetch", "focal_from_fov", "generate_nonrigid", "get_info", "holdout", "insert_lesions",
    "is_present",
    "load_agnews", "load_blender", "load_cifar10", "load_fashion_mnist", "load_fsdd", "load_imdb", "load_lesions",
    "load_mnist",
    "load_nerfies", "load_nonrigid_truth", "load_senteval", "load_sms_spam", "load_sst2", "load_tiny_nerf",
    "load_tinyshakespeare", "load_wikitext2", "load_youtube_spam", "nerfies_rays", "pad_or_crop", "parse_idx",
    "read_fsdd_tar", "read_idx", "read_imdb_csv", "render_nonrigid", "require", "seeded_split", "sha256_file",
    "true_warp", "user_cache_dir", "verify",
]
__all__ += ["AVMNIST", "AVMNISTParams", "generate_avmnist"]
