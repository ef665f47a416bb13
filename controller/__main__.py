from controller.process.manager import main

if __name__ == "__main__":
    main()
