"""ConflictScope: how a model ranks values when they conflict (host-side, except `ranking`).

    from iclr_jax import values
    vs = values.load_value_set("personal_protective")
    scen = values.template_scenarios(vs, values.sample_outlines(vs, 56, seed=0), seed=0)
    ev = values.evaluate(lm, scen, mode="mc", seed=0)
    values.summarize(ev.comparisons, vs, key=jax.random.key(0))["order"]

`lm` is any `LanguageModel` (the pretrained SmolLM2, an `OpenAIClient`, a scripted LM);
`ranking.bradley_terry` and `ranking.fit_counts` are pure JAX and work under `jit` / `vmap`.
"""

from iclr_jax.values.evaluate import (MODES, Evaluation, evaluate, parse_letter,
                                      parse_likert, simulate_users)
from iclr_jax.values.ranking import (BootstrapRanking, WinRates, bootstrap_bradley_terry,
                                     bradley_terry, fit_counts, kendall_tau,
                                     pairwise_win_rates, spearman, target_agreement,
                                     wilson_interval, win_counts)
from iclr_jax.values.generation import (STYLES, FilterReport, first_paragraph,
                                        generate_scenarios, parse_scenario, parse_yes_no,
                                        structural_problem)
from iclr_jax.values.scenarios import (KINDS, Outline, Scenario, check_outlines,
                                       sample_outlines, template_scenarios)
from iclr_jax.values.scripted import ScriptedJudge, ScriptedTarget, ScriptedUser
from iclr_jax.values.summary import group_share, summarize
from iclr_jax.values.value_sets import (BUILTIN, Value, ValueSet, load_value_set,
                                        ordering_instruction, value_set_from_dict)

__all__ = ["BUILTIN", "STYLES", "check_outlines", "first_paragraph", "BootstrapRanking",
           "Evaluation", "FilterReport", "KINDS", "MODES",
           "Outline", "Scenario", "ScriptedJudge", "ScriptedTarget", "ScriptedUser", "Value",
           "ValueSet", "WinRates", "bootstrap_bradley_terry", "bradley_terry", "evaluate",
           "fit_counts", "generate_scenarios", "group_share", "kendall_tau",
           "load_value_set", "ordering_instruction", "pairwise_win_rates", "parse_letter",
           "parse_likert", "parse_scenario", "parse_yes_no", "sample_outlines", "simulate_users",
           "spearman",
           "structural_problem", "summarize", "target_agreement", "template_scenarios",
           "value_set_from_dict", "wilson_interval", "win_counts"]
