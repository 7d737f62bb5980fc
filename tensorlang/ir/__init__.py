"""The intermediate representation shared by every stage of the pipeline."""
