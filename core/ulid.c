/* ulid — to be written */
