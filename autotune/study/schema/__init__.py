"""What a study stores, typed: the one owner of every stored blob and attribute key.

Everything autotune learns is kept as Optuna user attributes (JSON) in the study's
storage (by default ``<runs_dir>/<study>/study.db``; autotune/study/layout.py owns the
directory and the storage URL), so the database alone is enough. Per trial
(:mod:`.keys`, trial-level):

    reason, detail, launched, role, ...    plain values (records.TrialRecord reads them)
    scorecard                              Scorecard: correctness, performance,
                                           stability, resources (:mod:`.scorecard`)
    conditions                             Conditions: the host's state over its run
    prediction, memory_fit                 the cost model's prediction before launch

Per study (:mod:`.keys`, study-level):

    autotune.repeats          {trial: [Repeat]}           racing, baseline checks, confirm
    autotune.confirm          {trial: ConfirmVerdict}     confirm's spread and paired test
    autotune.confirm_run      ConfirmRun                  the latest confirm (resume)
    autotune.confirm_order    [[trial, ...], ...]         the order of each round
    autotune.profile          {trial: ProfileResult}      ``profile``
    autotune.soak             SoakVerdict                 the latest ``soak``
    autotune.stages           {stage: StageResult}        ``tune``'s stages
    autotune.fingerprint(_parts), autotune.stop_rules, autotune.published,
    cost_model_fit, predicted_seeded                      see :mod:`.keys`

Every blob is a dataclass with ``to_json()``/``from_json()`` and a format ``version``
(:mod:`.blob`); ``from_json`` reads what older autotune wrote (missing fields default,
unknown ones are ignored; tests/fixtures/study_v1 is such a study).
"""

from autotune.study.schema.blob import Blob
from autotune.study.schema.confirm import ConfirmRun, ConfirmVerdict, PairedTest
from autotune.study.schema.repeats import Repeat
from autotune.study.schema.scorecard import Correctness, Resources, Scorecard, Stability

__all__ = ["Blob", "ConfirmRun", "ConfirmVerdict", "Correctness", "PairedTest", "Repeat",
           "Resources", "Scorecard", "Stability"]
