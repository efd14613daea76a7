# First, before any test module imports NumPy or torch: a pytest-xdist worker's share of the
# cores for their threads (cores.py says why).
from .cores import share_the_cores

share_the_cores()
