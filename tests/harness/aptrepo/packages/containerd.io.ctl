Section: misc
Priority: optional
Standards-Version: 3.9.2
Package: containerd.io
Version: 99.0.0-standin1
Architecture: all
Maintainer: sparkfleet tests <tests@sparkfleet.invalid>
Description: STAND-IN for containerd.io from Docker's repository (sparkfleet test package)
 Built by tests/harness/aptrepo/build.sh for the Molecule tier; it is not
 the vendor's package and installs only small stand-in scripts.
