Section: misc
Priority: optional
Standards-Version: 3.9.2
Package: nvidia-container-toolkit
Version: 99.0.0-standin1
Architecture: all
Maintainer: sparkfleet tests <tests@sparkfleet.invalid>
Depends: python3
Files: ../files/nvidia-ctk /usr/bin/
 ../files/nvidia-container-runtime /usr/bin/
Description: STAND-IN for nvidia-container-toolkit from NVIDIA's libnvidia-container repository (sparkfleet test package)
 Built by tests/harness/aptrepo/build.sh for the Molecule tier; it is not
 the vendor's package and installs only small stand-in scripts.
