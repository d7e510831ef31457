"""Agents that act in the `envs` and learn from them: ProPerAssistant, the proactive,
personalised assistant of ProPerSim (`properassistant`: memory with retrieval, two
candidates a step, pairs by the user's scores, a daily DPO update).

    from iclr_jax.agents import properassistant as pa
    memory, since_last, log = pa.simulate_day(params, apply, persona, table, activities,
                                              memory, since_last, day, key)
"""

from iclr_jax.agents import properassistant

__all__ = ["properassistant"]
