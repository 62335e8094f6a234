"""Where one forward of a SmolLM2-135M-shaped model spends its time (random weights, same shapes).

    python -m spectr_gbv.bench.forward_profile [--config PATH] [--device cuda|cpu]

Times a one-token decoding step (1 and 4 rows), a K = 4 x 7-token scoring forward and a
no-cache 100-token forward, then prints torch.profiler's table for five decoding steps. It
answers one question: is a step bound by the device's arithmetic or by the host launching
kernels? Weights are random (shapes are what matter), so no model file is needed beyond
the config (default: the cached default target's config.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def median_ms(fn, device: torch.device, repeats: int = 20) -> float:
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(3):
        fn()
    samples = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def main() -> None:
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="a config.json (default: the cached default target's)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if args.config is None:
        from ..models.hf import default_target_dir

        args.config = str(default_target_dir() / "config.json")
    config = json.loads(open(args.config).read())
    for key in ("dtype", "transformers_version", "_model_name_or_path"):
        config.pop(key, None)
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = LlamaForCausalLM(LlamaConfig(**config)).to(device, dtype).eval()
    with torch.inference_mode():
        prompt = torch.randint(0, config["vocab_size"], (1, 100), device=device)

        def prefilled(rows: int) -> DynamicCache:
            cache = DynamicCache(config=model.config)
            model(prompt, past_key_values=cache, use_cache=True, logits_to_keep=1)
            if rows > 1:
                cache.batch_repeat_interleave(rows)
            return cache

        results = {}
        for rows in (1, 4):
            cache, token = prefilled(rows), torch.randint(0, config["vocab_size"], (rows, 1), device=device)

            def step(cache=cache, token=token):
                model(token, past_key_values=cache, use_cache=True, logits_to_keep=1)
                cache.crop(-1)

            results[f"decoding step, {rows} row(s)"] = median_ms(step, device)
        cache, blocks = prefilled(4), torch.randint(0, config["vocab_size"], (4, 7), device=device)

        def score():
            model(blocks, past_key_values=cache, use_cache=True, logits_to_keep=7)
            cache.crop(-7)

        results["scoring forward, 4 x 7 tokens"] = median_ms(score, device)
        results["no-cache forward, 100 tokens"] = median_ms(lambda: model(prompt, use_cache=False, logits_to_keep=1), device)
        for name, ms in results.items():
            print(f"{name}: {ms:.1f} ms")
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        cache, token = prefilled(1), torch.randint(0, config["vocab_size"], (1, 1), device=device)
        with profile(activities=activities) as prof:
            for _ in range(5):
                model(token, past_key_values=cache, use_cache=True, logits_to_keep=1)
                cache.crop(-1)
        print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=12))


if __name__ == "__main__":
    main()
