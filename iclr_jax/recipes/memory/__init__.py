"""TokMem: procedural memory tokens on the frozen pretrained LLM."""
