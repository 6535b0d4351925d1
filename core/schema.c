/* schema — to be written */
