"""What the tests stand up on loopback in place of the world: real MariaDB and PostgreSQL
servers (db_servers, db_fixtures; Debian packages from install_test_packages.sh), and test
doubles where the real thing cannot run here: TF Serving (tf_serving) and the Kubeflow
Pipelines API (kfp_server), each answering with the real server's error codes."""
