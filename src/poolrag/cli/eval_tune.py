"""``poolrag eval --tune [--save]``: the options, the run after the modes, and what it prints.

Kept apart from :mod:`poolrag.cli.eval` so the modes' table and the tuning read separately; the
work itself is :mod:`poolrag.evaluation.tune` and the record :mod:`poolrag.stores.retrieval_record`.
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any

from poolrag.cli.whole_numbers import at_least
from poolrag.errors import InvalidInputError

if TYPE_CHECKING:
    from poolrag.evaluation import BeirDataset
    from poolrag.evaluation.run import EvalReport, Evaluation
    from poolrag.evaluation.tune import TuneReport

logger = logging.getLogger(__name__)

DEFAULT_FOLDS = 5  # poolrag.evaluation.tune.DEFAULT_FOLDS, spelled out so --help imports nothing


def add_tune_arguments(parser: Any) -> None:
    parser.add_argument(
        "--tune",
        action="store_true",
        help="choose the hybrid fusion and weights (and the reranker's share with --rerank) on these "
        "qrels by cross-validation over queries; print held-out metrics against dense",
    )
    parser.add_argument(
        "--folds",
        type=at_least(2),
        default=DEFAULT_FOLDS,
        help=f"folds over queries (default {DEFAULT_FOLDS})",
    )
    # numpy seeds its generators from whole numbers of at least 0 only
    parser.add_argument(
        "--seed", type=at_least(0), default=0, help="seed of the folds and the test (default 0)"
    )
    parser.add_argument(
        "--save",
        action="store_true",
        help="with --tune: write the setting chosen on all queries into the collection's record, "
        "where 'poolrag search', Retriever and the adapters read it",
    )


def check_tune_arguments(args: argparse.Namespace) -> None:
    from poolrag.stores.retrieval_record import MAX_PREFETCH

    if args.save and not args.tune:
        raise InvalidInputError("--save writes the setting --tune chooses: add --tune")
    if args.tune and args.rerank_weight is not None:
        logger.warning(
            "--rerank-weight %s weighs the table's reranked rows; --tune tries its own shares "
            "(0 to 1) and reports the one it chose",
            args.rerank_weight,
        )
    if args.save and args.prefetch is not None and args.prefetch > MAX_PREFETCH:
        raise InvalidInputError(
            f"--prefetch {args.prefetch}: a saved setting keeps legs of at most {MAX_PREFETCH}"
        )


def tune_and_save(
    args: argparse.Namespace, evaluation: Evaluation, dataset: BeirDataset, report: EvalReport
) -> TuneReport:
    """Tune on the collection the modes were just measured on; with ``--save``, record the choice."""
    from poolrag.evaluation.tune import tune
    from poolrag.stores.retrieval_record import save_record

    depth = int(report.settings["chunks_per_query"])  # type: ignore[call-overload]
    tuned = tune(
        evaluation,
        dataset,
        report.runs["dense"],
        k=args.k,
        depth=depth,
        split=args.split,
        prefetch=args.prefetch,
        folds=args.folds,
        seed=args.seed,
    )
    if args.save:
        save_record(evaluation.pipeline.store, tuned.record)
        logger.info("saved %s into collection %r", tuned.record.to_metadata(), args.collection)
    return tuned


def tuned_summary(tuned: TuneReport, saved: bool) -> str:
    """The lines printed under the modes' table."""
    from poolrag.evaluation.tune import Setting

    names = list(tuned.held_out)
    width = 14
    chosen = Setting(tuned.record.fusion, tuned.record.rerank_weight)
    folds = "; ".join(setting.describe() for setting in tuned.fold_settings)  # a setting has commas
    c = tuned.comparison
    return "\n".join(
        [
            "",
            f"tuned by {tuned.folds}-fold cross-validation over {tuned.queries} queries (seed {tuned.seed}), "
            f"each query scored by the setting chosen on the other folds ({folds}):",
            "".ljust(width) + "".join(name.rjust(12) for name in names),
            "tuned".ljust(width) + "".join(f"{tuned.held_out[name]:12.4f}" for name in names),
            "dense".ljust(width) + "".join(f"{tuned.dense[name]:12.4f}" for name in names),
            f"per query on {tuned.objective} against dense: {c.wins} wins, {c.ties} ties, {c.losses} losses; "
            f"mean difference {c.mean_difference:+.4f}, p = {c.p_value:.4f} (paired sign-flip permutation)",
            f"chosen on all queries: {chosen.describe()}, legs {tuned.record.prefetch} deep; "
            + ("saved into the collection's record" if saved else "not saved (add --save to keep it)"),
            *_doubts(tuned, chosen.dense_alone),
        ]
    )


def _doubts(tuned: TuneReport, dense_alone: bool) -> tuple[str, ...]:
    """What the held-out comparison says against the choice: it lost to dense (however small the
    p-value: a choice that scores below dense on queries it never saw fits these queries, not new
    ones), or it won by no more than chance. Dense alone needs neither."""
    c = tuned.comparison
    if dense_alone:
        return ()
    if c.mean_difference < 0:
        key = tuned.objective
        return (
            f"held out, the tuned setting did worse than dense alone ({key} {tuned.held_out[key]:.4f} "
            f"against {tuned.dense[key]:.4f}): it fits these queries, not new ones; search dense "
            "(without --hybrid), or judge more queries before saving it",
        )
    return (_UNPROVEN,) if c.p_value >= 0.05 else ()


#: said under a choice that beat dense on no firm evidence (a choice of dense alone needs no warning;
#: the reranker's share on top of dense is not dense alone)
_UNPROVEN = (
    "the held-out difference from dense is within chance (p >= 0.05): the choice may not help on new "
    "queries; more judged queries would tell"
)
