"""TokMem: procedural memory as new vocabulary ids on a frozen language model.

    from iclr_jax.memory import init_bank, memory_loss, generate_with_memory
    bank = init_bank(key, backbone.embedding, num_procedures)        # ids V .. V + l - 1
    loss, _ = memory_loss(backbone, bank, tokens, query_lengths, lengths)  # grads: bank only

`Backbone` is a frozen LM as functions of input embeddings (`nn.frozen_backbone` builds one
from a `DecoderLM`); `MemoryRegistry` names the memories of each round (host-side).
"""

from iclr_jax.memory.bank import (MemoryBank, check_bank, concat_banks, embed_with_memory,
                                  head_with_memory, init_bank, logits_with_memory,
                                  renormalize_rows, response_mask, tokmem_loss)
from iclr_jax.memory.registry import MemoryRegistry, training_rows
from iclr_jax.memory.training import (MemoryBatch, MemoryTrainState, init_train_state,
                                      memory_train_step, tokmem_optimizer)
from iclr_jax.memory.model import (Backbone, generate_with_memory, memory_logits, memory_loss,
                                   memory_step_fn, oracle_rewrite)

__all__ = ["Backbone", "MemoryBank", "MemoryBatch", "MemoryRegistry", "MemoryTrainState",
           "init_train_state", "memory_train_step", "tokmem_optimizer", "training_rows", "check_bank", "concat_banks", "embed_with_memory",
           "generate_with_memory", "head_with_memory", "init_bank", "logits_with_memory",
           "memory_logits", "memory_loss", "memory_step_fn", "oracle_rewrite",
           "renormalize_rows", "response_mask", "tokmem_loss"]
