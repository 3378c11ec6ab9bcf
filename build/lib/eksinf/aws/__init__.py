"""AWS operations: session factory, status, controller credentials, contract, enroll, teardown."""
