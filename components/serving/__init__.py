"""Serving in public: who is asking and whose turn it is (visitors), ZeroGPU (gpu), what a request may cost (limits)."""
