Section: misc
Priority: optional
Standards-Version: 3.9.2
Package: docker-ce
Version: 5:99.0.0-standin1~debian.12~bookworm
Architecture: all
Maintainer: sparkfleet tests <tests@sparkfleet.invalid>
Depends: containerd.io, docker-ce-cli
Postinst: ../files/docker-ce.postinst
Files: ../files/dockerd /usr/bin/
 ../files/docker.service /lib/systemd/system/
Description: STAND-IN for docker-ce from Docker's repository (sparkfleet test package)
 Built by tests/harness/aptrepo/build.sh for the Molecule tier; it is not
 the vendor's package and installs only small stand-in scripts.
