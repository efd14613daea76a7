# First, before any test module imports NumPy or torch: a pytest-xdist worker's share of the
# cores for their threads (cores.py says why).
from coursekit.course.numerics import pin_cpu_kernels

from .cores import share_the_cores

share_the_cores()
pin_cpu_kernels()  # the numbers the lessons' text quotes, on any x86-64 machine
