Section: misc
Priority: optional
Standards-Version: 3.9.2
Package: docker-ce-cli
Version: 5:99.0.0-standin1~debian.12~bookworm
Architecture: all
Maintainer: sparkfleet tests <tests@sparkfleet.invalid>
Files: ../files/docker /usr/bin/
Description: STAND-IN for docker-ce-cli from Docker's repository (sparkfleet test package)
 Built by tests/harness/aptrepo/build.sh for the Molecule tier; it is not
 the vendor's package and installs only small stand-in scripts.
