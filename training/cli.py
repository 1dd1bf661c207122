"""``python -m training``: ``train hatten``, ``train reranker`` and ``export`` (a HAtten checkpoint).

Not part of the installed package: training needs the ``train`` extra (torch, onnx) and the
checkout's data; ``citewise train``/``citewise export`` forward here from a checkout for one release.
"""

from __future__ import annotations

import argparse
import sys


def _train_hatten(args: argparse.Namespace) -> int:
    try:
        from training import hatten_train
    except ImportError as exc:  # torch missing
        print(
            f"train hatten needs the train extra (pip install -e '.[train]'): {exc}",
            file=sys.stderr,
        )
        return 2
    path = hatten_train.train(hatten_train.config_from_args(args))
    print(f"checkpoint: {path}  (best by validation: {path.parent / 'best'})")
    return 0


def _train_reranker(args: argparse.Namespace) -> int:
    try:
        from dataclasses import fields

        from training import reranker_train
    except ImportError as exc:  # torch / transformers missing
        print(
            f"train reranker needs the train extra (pip install -e '.[train]'): {exc}",
            file=sys.stderr,
        )
        return 2
    if not args.resume and not args.data:
        print(
            "citewise train reranker: --data is needed for a new run (build it with "
            "python -m training.reranker_data)",
            file=sys.stderr,
        )
        return 2
    explicit = {f.name for f in fields(reranker_train.TrainConfig) if getattr(args, f.name, None) is not None}
    path = reranker_train.train(
        reranker_train.config_from_args(args),
        resume=args.resume,
        stop_after_steps=args.stop_after_steps,
        explicit=explicit,
    )
    print(f"checkpoint: {path}")
    return 0


def _add_reranker_arguments(p: argparse.ArgumentParser) -> None:
    from training.train_configs import add_reranker_arguments  # no torch: every command builds this

    add_reranker_arguments(p)


def _export(args: argparse.Namespace) -> int:
    try:
        from training import hatten_export
    except ImportError as exc:
        print(f"export needs the train extra (pip install -e '.[train]'): {exc}", file=sys.stderr)
        return 2
    from pathlib import Path

    tok = args.tokenizer or str(Path(args.checkpoint).parent / "tokenizer.json")
    out = hatten_export.export(args.checkpoint, tok, args.out)
    print(f"exported to {out}")
    return 0


def _add_train_arguments(p: argparse.ArgumentParser) -> None:
    """The trainer's options, generated from its config so the two never drift apart."""
    from dataclasses import MISSING, fields

    p.add_argument("--out", required=True, help="run folder; running the same command again resumes it")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--store", help="paper store: self-supervised pairs (recipe in training/hatten_data.py)")
    src.add_argument(
        "--release", help="folder in the HAtten authors' layout (contexts.json, papers.json, train.json...)"
    )
    from training.train_configs import HattenTrainConfig  # no torch: every command builds this

    for f in fields(HattenTrainConfig):
        if f.name in ("out", "store", "release", "extra") or f.default is MISSING:
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(f.default, bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default)
        else:
            p.add_argument(flag, type=type(f.default), default=f.default, help=f"default {f.default}")


def register(subparsers) -> None:
    """Add ``train hatten``, ``train reranker`` and ``export`` to the main parser's subcommands."""
    train = subparsers.add_parser("train", help="train a model (needs the train extra)")
    tsub = train.add_subparsers(dest="model", required=True)
    hat = tsub.add_parser("hatten", help="train the HAtten prefetch encoder (resumable)")
    _add_train_arguments(hat)
    hat.set_defaults(func=_train_hatten)
    rr = tsub.add_parser("reranker", help="train the cross-encoder reranker on CPU (resumable with --resume)")
    _add_reranker_arguments(rr)
    rr.set_defaults(func=_train_reranker)

    exp = subparsers.add_parser("export", help="export a HAtten checkpoint to ONNX fp32 + int8")
    exp.add_argument("checkpoint", help="checkpoint folder (config.json + model.pt), e.g. RUN/best")
    exp.add_argument("--tokenizer", help="tokenizer.json (default: the run folder's)")
    exp.add_argument("--out", required=True, help="model folder to write (e.g. runs/hatten-export)")
    exp.set_defaults(func=_export)


def main(argv: list[str] | None = None) -> int:
    """``python -m training train|export ...`` (``citewise train`` forwards here from a checkout)."""
    ap = argparse.ArgumentParser(prog="python -m training")
    register(ap.add_subparsers(dest="command", required=True))
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
