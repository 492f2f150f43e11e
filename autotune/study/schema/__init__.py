"""What a study stores, typed: the one owner of every stored blob and attribute key.

Everything autotune learns is kept as Optuna user attributes (JSON) in the study's
storage (by default ``<runs_dir>/<study>/study.db``; autotune/study/layout.py owns the
directory and the storage URL), so the database alone is enough. Per trial
(:mod:`.keys`, trial-level):

    reason, detail, launched, role, ...    plain values (records.TrialRecord reads them)
    worker, process                        Worker, TrialProcess: who runs it, what to kill
                                           when that orchestrator is gone (:mod:`.worker`)
    scorecard                              Scorecard: correctness, performance,
                                           stability, resources (:mod:`.scorecard`)
    conditions                             Conditions: the host's state over its run
                                           (autotune/study/conditions.py)
    prediction                             StoredPrediction: the cost model's, before launch

Per study (:mod:`.keys`, study-level):

    autotune.repeats          {trial: [Repeat]}           racing, baseline checks, confirm
    autotune.confirm          {trial: ConfirmVerdict}     confirm's spread and paired test
    autotune.confirm_run      ConfirmRun (a ConfirmPlan)  the latest confirm (resume)
    autotune.confirm_order    [[trial, ...], ...]         the order of each round
    autotune.profile          {trial: ProfileResult}      ``profile``
    autotune.soak             {trial: SoakVerdict}        each trial's latest ``soak``
    autotune.stages           {stage: StageResult}        ``tune``'s stages (a subclass each
                                                          where a stage finds more)
    autotune.published        {name: Published}           figures in the artifact store
    autotune.fingerprint_parts FingerprintParts           what makes it the same study
    cost_model_fit            FitRecord                   the study's own cost-model fit
    autotune.fingerprint, autotune.stop_rules,
    predicted_seeded                                      plain values, see :mod:`.keys`

Every blob is a dataclass with ``to_json()``/``from_json()`` and a format ``version``
(:mod:`.blob`); ``from_json`` reads what older autotune wrote (missing fields default,
unknown ones are ignored; tests/fixtures/study_v1 is such a study).

- :mod:`.blob`: the base of every stored blob;
- :mod:`.confirm`: what ``confirm`` stores;
- :mod:`.fingerprint`: what makes a study the same study (``autotune.fingerprint``;
- :mod:`.fit`: a fit of the cost model's constants (``cost_model_fit`` on a study;
- :mod:`.keys`: every attribute key the study stores;
- :mod:`.prediction`: the cost model's prediction of a trial, stored before it launches
  (``prediction``);
- :mod:`.profile`: what ``profile`` stores per trial (``autotune.profile``;
- :mod:`.published`: what was uploaded to the artifact store (``autotune.published``);
- :mod:`.repeats`: more runs of a trial's configuration, kept on the study (a finished
  Optuna trial cannot change);
- :mod:`.scorecard`: a trial's scorecard as stored (``scorecard``);
- :mod:`.soak`: what ``soak`` stores;
- :mod:`.stages`: what ``tune``'s stages store (``autotune.stages``;
- :mod:`.worker`: a trial's orchestrator and processes (``worker``, ``process``).
"""

from autotune.study.conditions import Conditions
from autotune.study.schema.blob import Blob
from autotune.study.schema.confirm import ConfirmPlan, ConfirmRun, ConfirmVerdict, PairedTest
from autotune.study.schema.fingerprint import FingerprintParts
from autotune.study.schema.fit import FitRecord
from autotune.study.schema.prediction import StoredPrediction
from autotune.study.schema.profile import Interconnect, ProfileResult
from autotune.study.schema.published import Published
from autotune.study.schema.repeats import Repeat
from autotune.study.schema.scorecard import Correctness, Resources, Scorecard, Stability
from autotune.study.schema.soak import SoakVerdict
from autotune.study.schema.stages import StageResult
from autotune.study.schema.worker import TrialProcess, Worker

__all__ = ["Blob", "Conditions", "ConfirmPlan", "ConfirmRun", "ConfirmVerdict", "Correctness",
           "FingerprintParts", "FitRecord", "Interconnect", "PairedTest", "ProfileResult",
           "Published", "Repeat", "Resources", "Scorecard", "SoakVerdict", "Stability",
           "StageResult", "StoredPrediction", "TrialProcess", "Worker"]
