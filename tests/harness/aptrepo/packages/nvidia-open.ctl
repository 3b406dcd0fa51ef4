Section: misc
Priority: optional
Standards-Version: 3.9.2
Package: nvidia-open
Version: 580.95.05-1
Architecture: all
Maintainer: sparkfleet tests <tests@sparkfleet.invalid>
Files: ../files/nvidia-smi /usr/bin/
Description: STAND-IN for the open NVIDIA driver (nvidia-open) from NVIDIA's CUDA repository (sparkfleet test package)
 Built by tests/harness/aptrepo/build.sh for the Molecule tier; it is not
 the vendor's package and installs only small stand-in scripts.
