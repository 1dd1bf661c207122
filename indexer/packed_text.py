"""Byte-exact compression of the verbatim text a store keeps: a paper's original BibTeX and its extras.

Why: the store keeps a user's own entry verbatim, so citewise inserts exactly what the user
wrote (Better BibTeX keys, field order, braces). Kept as plain text it was the largest part of a
store (1.5 KB of 5.3 KB a paper on ACM-CR, and it made rows too large for two to share a page).

Deflate with a preset dictionary: a fixed one of common BibTeX text, followed for BibTeX by the
paper's own title and abstract, which an entry usually repeats. The first byte says which
dictionary a blob used, so decoding never depends on a guess:

- ``0x01``: the fixed dictionary only;
- ``0x02``: the fixed dictionary, then the title and the abstract the row held when it was packed.

The store only writes ``0x02`` when the abstract is not empty: the one place that changes a
stored row's abstract without rewriting its BibTeX fills an *empty* abstract (a duplicate
record's merge), so a ``0x02`` blob's dictionary never changes under it. Plain ``str`` values
(rows written before packing existed) are returned as they are. The dictionaries are part of
the store's format: never edit them; add a new tag instead.
"""

from __future__ import annotations

import zlib

_PLAIN_TAG = 0x01
_ROW_TAG = 0x02

# Common BibTeX text (ACM, ACL Anthology, arXiv, DBLP, Zotero/Better BibTeX exports). Deflate
# finds matches anywhere in the last 32 KB, and the nearest matches code shortest, so the most
# frequent text comes last. Part of the format: never change it.
FIXED_DICTIONARY = (
    b"@misc{@book{@phdthesis{@techreport{@incollection{@article{@inproceedings{"
    b"  archiveprefix = {arXiv},\n  primaryclass = {cs.CL},\n  eprint = {"
    b"  journal = {CoRR},\n  volume = {abs/"
    b"  journal = {Transactions of the Association for Computational Linguistics},\n"
    b"  journal = {Computational Linguistics},\n"
    b"  booktitle = {Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing (EMNLP)},\n"
    b"  booktitle = {Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics},\n"
    b"  booktitle = {Proceedings of the 2019 Conference of the North American Chapter of the Association for "
    b"Computational Linguistics: Human Language Technologies, Volume 1 (Long and Short Papers)},\n"
    b"  publisher = {Association for Computational Linguistics},\n  address = {Online},\n"
    b"  editor = {},\n  month = jul,\n  month = jun,\n  month = nov,\n  month = dec,\n"
    b"  url = {https://aclanthology.org/},\n  url = {https://arxiv.org/abs/},\n"
    b"  biburl = {https://dblp.org/rec/},\n  bibsource = {dblp computer science bibliography, https://dblp.org},\n"
    b"  timestamp = {},\n  file = {},\n  urldate = {},\n  langid = {english},\n  shorttitle = {},\n"
    b"  note = {},\n  organization = {IEEE},\n  publisher = {Springer},\n  publisher = {IEEE},\n"
    b"  publisher = {ACM},\n  address = {New York, NY, USA},\n"
    b"keywords = {},\nnumpages = {},\nlocation = {},\nseries = {},\narticleno = {},\nissue_date = {},\n"
    b"journal = {ACM Trans. Inf. Syst.},\njournal = {Commun. ACM},\nmonth = jan,\n"
    b"booktitle = {Proceedings of the 42nd International ACM SIGIR Conference on Research and Development "
    b"in Information Retrieval},\n"
    b"booktitle = {Proceedings of the ACM Conference on Human Factors in Computing Systems},\n"
    b"booktitle = {Proceedings of the International Conference on Information and Knowledge Management},\n"
    b"abstract = {In this paper, we propose a novel approach to the problem of the task. "
    b"We present a new method based on the results of the experiments, which show that our model "
    b"outperforms the state-of-the-art methods on the data sets. },\n"
    b"pages = {},\nvolume = {},\nnumber = {},\nissn = {},\n"
    b'{"pages": "", "publisher": "Association for Computing Machinery", "address": "New York, NY, USA", '
    b'"series": "", "isbn": "", "url": "https://doi.org/10.1145/", "location": "", "numpages": ""}'
    b"\n}\n@inproceedings{10.1145/,\nauthor = {},\ntitle = {},\nyear = {},\nisbn = {},\n"
    b"publisher = {Association for Computing Machinery},\naddress = {New York, NY, USA},\n"
    b"url = {https://doi.org/10.1145/},\ndoi = {10.1145/},\nbooktitle = {Proceedings of the },\n"
    b"pages = {},\nnumpages = {},\nlocation = {},\nseries = {}\n}\n"
)

_ROW_SEPARATOR = b"\n"


def _compressor(zdict: bytes) -> zlib._Compress:
    return zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, zdict)


def _row_dictionary(title: str, abstract: str) -> bytes:
    return (
        FIXED_DICTIONARY + _ROW_SEPARATOR + title.encode("utf-8") + _ROW_SEPARATOR + abstract.encode("utf-8")
    )


def pack(text: str, title: str = "", abstract: str = "") -> bytes | str:
    """``text`` packed for the store, with the row's title and abstract as context when there is an
    abstract (see the module docstring for why an empty abstract must not be used). Empty text
    stays ``""`` so empty columns stay cheap and comparable."""
    if not text:
        return ""
    if abstract:
        tag, zdict = _ROW_TAG, _row_dictionary(title, abstract)
    else:
        tag, zdict = _PLAIN_TAG, FIXED_DICTIONARY
    comp = _compressor(zdict)
    return bytes([tag]) + comp.compress(text.encode("utf-8")) + comp.flush()


def unpack(value: bytes | str | None, title: str = "", abstract: str = "") -> str:
    """The text :func:`pack` was given, byte for byte (plain ``str`` values pass through)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not value:
        return ""
    tag = value[0]
    if tag == _PLAIN_TAG:
        zdict = FIXED_DICTIONARY
    elif tag == _ROW_TAG:
        zdict = _row_dictionary(title, abstract)
    else:
        raise ValueError(f"packed text has unknown tag {tag:#x}: written by a newer citewise?")
    dec = zlib.decompressobj(-15, zdict)
    return (dec.decompress(value[1:]) + dec.flush()).decode("utf-8")
