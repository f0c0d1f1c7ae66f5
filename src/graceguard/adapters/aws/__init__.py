"""AWS, through boto3: the SQS consumer of Auto Scaling lifecycle notifications and EventBridge
events, the lifecycle hook's heartbeats and completion, and the reads ``graceguard audit aws``
needs. Adapters only: what to do with a message is decided in the service layer and the engine;
nothing here imports lightkube."""
