"""What bench/gpu/run.sh asks the python it was given, one `key=value` a
line: torch's version, its library folder (where the binaries find libtorch),
its CUDA, whether it sees a device and which, and the Hugging Face packages
the Trainer step needs. Exits 1 when torch cannot be imported (the line
`error=...` says why)."""

import importlib.metadata as md
import os
import platform
import sys

print(f"python={platform.python_version()}")
try:
    import torch
except Exception as e:  # any import failure is a reason to skip, said as it is
    print(f"error={type(e).__name__}: {e}")
    sys.exit(1)
print(f"torch={torch.__version__}")
print(f"torch_lib={os.path.join(os.path.dirname(torch.__file__), 'lib')}")
print(f"cuda={torch.version.cuda}")
available = torch.cuda.is_available()
print(f"cuda_available={available}")
print(f"device={torch.cuda.get_device_name(0) if available else ''}")
for name in ("transformers", "accelerate"):
    try:
        print(f"{name}={md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name}=")
